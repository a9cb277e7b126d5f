"""A trained model as one artifact (``asrtrain export``) and applying it to any audio
(``asrtrain transcribe``, :class:`~asrtrain.transcribe.transcriber.Transcriber`).

The exported directory holds everything the recipe's ``transcribe.sh`` found scattered
over ``exp/`` and ``data/lang``: the network, the graph, the front end's settings and
models, the decoding setting picked on dev, and a manifest of checksums. Applying it
runs the same library functions the recipe's stages run (features, i-vectors, fMLLR,
archive, lattice search), so its words are those of ``asrtrain decode``.
"""
