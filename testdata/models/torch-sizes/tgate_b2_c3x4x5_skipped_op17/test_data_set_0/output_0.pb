
BoutputJ)4s;²Ü: