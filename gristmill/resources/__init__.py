"""Data files shipped with gristmill (word lists); see README.md for sources and licences."""
