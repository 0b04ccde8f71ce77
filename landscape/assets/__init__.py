"""What ships with the package and how it is built (``python -m landscape.assets``): the zoo
checkpoints (:mod:`~landscape.assets.checkpoints`), the figures that ship as data
(:mod:`~landscape.assets.figures`), the pages' default requests (:mod:`~landscape.assets.views`)
and the shipped results computed from them (:mod:`~landscape.assets.results`)."""
