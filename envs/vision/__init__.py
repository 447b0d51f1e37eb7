"""Small generated and bundled images for the vision experiments; import the modules themselves.

* :mod:`envs.vision.shapes` — procedurally drawn greyscale images whose complexity (shapes, textures) is known by
  construction.
* :mod:`envs.vision.digits` — scikit-learn's bundled 8x8 handwritten digits, upsampled.
"""

from __future__ import annotations
