"""Audio ops (Data-Juicer's names, params and semantics): duration, size and NMF-SNR filters and the
ffmpeg-wrapped mapper."""
