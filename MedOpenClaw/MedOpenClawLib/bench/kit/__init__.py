"""The generic pieces benchmark modules are built from, named by what they do: answer parsing (:mod:`.parsing`),
final-answer writing (:mod:`.answers`) and scoring gates (:mod:`.scoring`). A module's folder combines them; none
of them knows a module."""
