"""Front-ends over the action registry: REST (headless or inside Slicer) and the command line."""
