
Boutput_1JŸ(?´?­w?