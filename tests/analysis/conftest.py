"""tests/analysis: `browser.py` (headless chromium checks) importable from every test here as
`from browser import open_in_browser`; tests elsewhere insert this folder into sys.path themselves."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
