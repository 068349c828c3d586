"""Stop-word and flagged-word lists; see ../README.md."""
