"""Video ops (Data-Juicer's names, params and semantics): probe-based filters, dedup, splitting,
resizing, ffmpeg-wrapped and frame-based ops."""
