"""Is re-scoring with this config sound? ``reverify probe`` scores a sample twice on fresh servers (``two_passes``)
and says so (``report``: the verdicts); ``reverify noise`` scores it K times for the config's noise floor
(``noise_report``), which ``reverify compare --noise`` sets a comparison against. A rescoring's ``verifier_probe``
asset probes its first source (``two_passes.probe_first_source``)."""
