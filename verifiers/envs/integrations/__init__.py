"""Environments built on other projects' task libraries; each needs its optional extra."""
