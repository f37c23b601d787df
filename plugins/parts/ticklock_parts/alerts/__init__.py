"""The alert scanner (``alerts.scan``): users' alert rules on watched parts, evaluated against the parts'
current values; notifications (and email) when a rule fires. ``rules`` is the pure part."""
