"""Language helpers the foilers share (number, inflection, templates, coreference rules, WordNet constraints).

Not plug-ins: nothing here registers with a registry.
"""
