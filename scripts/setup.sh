#!/usr/bin/env bash
# One set-up command for a fresh Debian machine. Run from the repository root:
#
#     bash scripts/setup.sh
#
# Idempotent: every step checks what is already there, so re-running it on a machine that is
# set up (or on CI) is quick and never breaks an existing .venv.
#
# Steps:
#   1. Debian packages: speech synthesizers (flite, espeak-ng), sox, English prose
#      (fortunes, fortunes-min) that the evaluation sets are synthesized from, and the
#      wamerican word list that vets the sentences; chromium and its driver, the real browser
#      the live-caption page is tested in.
#   2. .venv with the CPU wheel of torch 2.13.0 pinned first (a plain "torch" could pull a
#      CUDA build), then the project in editable mode with its model and dev extras.
#   3. jfk.wav, the classic Whisper sample, taken from the npm package that ships it.
#   4. Recorded speech with transcripts (LibriVox sentences, card names, a command) from the
#      test data of the pocketsphinx source package on PyPI, for the recorded bench stream.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO_ROOT="$(pwd)"

log() { printf '[setup] %s\n' "$*" >&2; }

# --- 1. Debian packages ------------------------------------------------------------------
APT_PACKAGES=(flite espeak-ng sox fortunes-min fortunes wamerican chromium chromium-driver)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    fi
fi

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    log "Debian packages already installed: ${APT_PACKAGES[*]}"
elif [ "$(id -u)" -ne 0 ] && [ -z "$SUDO" ]; then
    log "ERROR: need root or sudo to install: ${missing[*]}"
    exit 1
else
    log "installing Debian packages: ${missing[*]}"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

# --- 2. Python environment ------------------------------------------------------------------
if [ ! -x .venv/bin/python ]; then
    log "creating .venv"
    python3 -m venv .venv
else
    log ".venv exists; reusing it"
fi

.venv/bin/pip install --upgrade pip
# Exactly this version: the CPU wheel lies on local disk; never ask for plain "torch".
.venv/bin/pip install torch==2.13.0
.venv/bin/pip install -e '.[models,dev,peers]'
# Benchmark peer, without its declared deps (they would add torchaudio and a web server stack;
# the 'peers' extra above holds what its in-process streaming paths import).
.venv/bin/pip install --no-deps whisperlivekit==0.2.26

# --- 3. jfk.wav ------------------------------------------------------------------------------
DATA_DIR="${STENOFLOW_DATA:-$REPO_ROOT/.cache/stenoflow/data}"
JFK="$DATA_DIR/jfk.wav"
JFK_MEMBER="package/cpp/whisper.cpp/bindings/go/samples/jfk.wav"
if [ -s "$JFK" ]; then
    log "jfk.wav already cached at $JFK"
else
    log "fetching jfk.wav from the npm package nodejs-whisper@0.3.1"
    mkdir -p "$DATA_DIR"
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    (cd "$tmp" && npm pack --silent nodejs-whisper@0.3.1 >/dev/null)
    tar -xzf "$tmp"/nodejs-whisper-0.3.1.tgz -C "$tmp" "$JFK_MEMBER"
    cp "$tmp/$JFK_MEMBER" "$JFK.part"
    mv "$JFK.part" "$JFK"
    log "jfk.wav cached at $JFK"
fi

# --- 4. recorded speech from the pocketsphinx source package ---------------------------------
PS_VERSION="5.1.1"
PS_DIR="$DATA_DIR/pocketsphinx"
if [ -s "$PS_DIR/goforward.raw" ] && [ -s "$PS_DIR/cards/cards.transcription" ]; then
    log "recorded speech already unpacked in $PS_DIR"
else
    log "fetching recorded speech from the pocketsphinx $PS_VERSION source package"
    ps_tmp="$(mktemp -d)"
    # The source package alone: pip reads its metadata with build tools it installs, which
    # come as wheels (with --no-binary :all: it compiled Cython from source, for minutes).
    .venv/bin/pip download --quiet --no-deps --no-binary pocketsphinx -d "$ps_tmp" "pocketsphinx==$PS_VERSION"
    members=(librivox cards goforward.raw)
    tar -xzf "$ps_tmp/pocketsphinx-$PS_VERSION.tar.gz" -C "$ps_tmp" \
        "${members[@]/#/pocketsphinx-$PS_VERSION/test/data/}"
    rm -rf "$PS_DIR.part" && mkdir -p "$PS_DIR.part"
    for m in "${members[@]}"; do cp -r "$ps_tmp/pocketsphinx-$PS_VERSION/test/data/$m" "$PS_DIR.part/"; done
    rm -rf "$PS_DIR" && mv "$PS_DIR.part" "$PS_DIR"
    rm -rf "$ps_tmp"
    log "recorded speech unpacked in $PS_DIR"
fi

log "done"
