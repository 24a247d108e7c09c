"""Voice commands: endpointing, pilot inference, the final pass and offloading (seed 001, PASU)."""
