"""``npudoctor dashboard``: the Textual UI. The only package that imports textual (``npudoctor[tui]``);
everything it shows is computed by :mod:`npudoctor.live`, which works without it."""
