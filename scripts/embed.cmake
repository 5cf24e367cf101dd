# cmake -DIN=file -DOUT=file.c -DNAME=sym -P scripts/embed.cmake: writes the bytes of IN as
# `const unsigned char NAME[]` and `const size_t NAME_len` into OUT (assets built into a binary).
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR len "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}" "/* Generated from ${IN} by scripts/embed.cmake. Do not edit. */\n#include <stddef.h>\n"
     "extern const unsigned char ${NAME}[];\nextern const size_t ${NAME}_len;\n"
     "const unsigned char ${NAME}[] = {\n${bytes}0x00};\nconst size_t ${NAME}_len = ${len};\n")
