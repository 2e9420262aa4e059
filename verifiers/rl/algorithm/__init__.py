"""The algorithm both commands train with: advantages, losses, schedules, samples and packing, the chunked LM head, chat tokens and the Trainer step."""
