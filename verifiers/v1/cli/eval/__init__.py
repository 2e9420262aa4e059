"""The v1 eval command's runners."""
