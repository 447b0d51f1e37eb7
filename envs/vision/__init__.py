"""Generated image tasks for the adaptive-computation rooms (numpy only). Import the modules explicitly:

* :mod:`envs.vision.zoom_queries` — noisy canvases with queries, some needing a zoom into fine detail, the zoom
  tool's crop geometry and the verifier.
"""
