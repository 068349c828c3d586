"""Data-Juicer's field-based filters, selectors and groupers that the older modules (``generic.py``,
``grouping.py``) lack: one op per module."""
