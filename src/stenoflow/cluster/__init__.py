"""stenoflow on a Ray cluster: batch transcription of archives and the server as a Serve deployment."""
