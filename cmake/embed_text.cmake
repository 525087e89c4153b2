# Writes file IN as a C string constant SYMBOL into OUT.
file(READ "${IN}" text HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${text}")
file(WRITE "${OUT}.tmp" "/* Generated from ${IN}. Do not edit. */\nconst char ${SYMBOL}[] = {${bytes}0x00};\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
