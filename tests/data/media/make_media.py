"""How the bundled test media were made (run once by hand; tests only read the results).

Sources: scikit-image 0.26.0's wheel (skimage/data/astronaut.png, chelsea.png: public domain / CC0,
see LICENSES.md) extracted to /tmp/skimg, and Debian's mate-backgrounds 1.26.0 (GPL-2+)
under /usr/share/backgrounds. Every image is a small resized copy.
"""
import os
import random

from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
MATE = "/usr/share/backgrounds/mate"


def small(src, out, size, fmt=None, **kw):
    im = Image.open(src).convert("RGB").resize(size, Image.LANCZOS)
    im.save(os.path.join(HERE, out), format=fmt, **kw)
    return im


small("/tmp/skimg/astronaut.png", "astronaut.jpg", (256, 256), quality=90)
small("/tmp/skimg/chelsea.png", "chelsea.png", (180, 120))
small(f"{MATE}/nature/Aqua.jpg", "aqua.jpg", (192, 120), quality=85)
small(f"{MATE}/nature/Garden.jpg", "garden.jpg", (192, 120), quality=85)
small(f"{MATE}/nature/LadyBird.jpg", "ladybird.jpg", (160, 120), quality=85)
small(f"{MATE}/nature/Storm.jpg", "storm.jpg", (200, 125), quality=85)
small(f"{MATE}/nature/Wood.jpg", "wood_tall.jpg", (60, 200), quality=85)  # aspect 0.3
small(f"{MATE}/abstract/Spring.png", "spring.png", (96, 60))
small(f"{MATE}/nature/Wood.jpg", "wood.webp", (160, 90), quality=80)
small(f"{MATE}/nature/Aqua.jpg", "tiny.jpg", (24, 16), quality=85)
# near-duplicate of garden.jpg: same picture, another size and JPEG quality (different bytes and pixels)
small(f"{MATE}/nature/Garden.jpg", "garden_small.jpg", (150, 94), quality=60)
# corrupt files: a JPEG cut in half, random bytes named .jpg
data = open(os.path.join(HERE, "storm.jpg"), "rb").read()
open(os.path.join(HERE, "truncated.jpg"), "wb").write(data[: len(data) // 2])
rnd = random.Random(16)
open(os.path.join(HERE, "random.jpg"), "wb").write(bytes(rnd.randrange(256) for _ in range(3000)))
