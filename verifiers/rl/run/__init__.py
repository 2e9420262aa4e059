"""What a run leaves on disk and manages: its lock, ranks (FSDP2 under torchrun), checkpoints, exported weights, trackers, records, the training report, the run directory's rules (``command``)."""
