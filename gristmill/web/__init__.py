"""Web data acquisition: downloads of URL lists and Common Crawl paths."""
