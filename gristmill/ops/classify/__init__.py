"""Model-based curation ops: classifiers, embeddings."""
