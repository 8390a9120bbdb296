
BdotJ=¿¡