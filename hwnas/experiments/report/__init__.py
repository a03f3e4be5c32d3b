"""What a run shows a person: the front as files, a plot and a table (:mod:`.front`), and the self-contained
HTML report (:mod:`.html`)."""
