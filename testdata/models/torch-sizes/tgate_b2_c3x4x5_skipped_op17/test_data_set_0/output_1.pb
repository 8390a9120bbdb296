
Boutput_1J)4s;²Ü: