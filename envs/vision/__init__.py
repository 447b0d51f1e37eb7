"""Small generated and bundled images for the adaptive-computation rooms (numpy only); import the modules themselves.

* :mod:`envs.vision.shapes` — procedurally drawn greyscale images whose complexity (shapes, textures) is known by
  construction.
* :mod:`envs.vision.digits` — scikit-learn's bundled 8x8 handwritten digits, upsampled.
* :mod:`envs.vision.zoom_queries` — noisy canvases with queries, some needing a zoom into fine detail, the zoom
  tool's crop geometry and the verifier.
"""

from __future__ import annotations
