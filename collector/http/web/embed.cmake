# Embeds the web view's files into one C source: a table of struct fs_web_asset
# (web_assets.h) with each file's URL path, content type, bytes and a strong ETag
# (the SHA-256 of the bytes, so a rebuilt binary with a changed page revalidates).
# Run as: cmake -DDIR=<collector/http/web> -DOUT=<file.c> -P embed.cmake
set(assets
    # URL path            file (its extension gives the content type)
    "/|index.html"
    "/web/fabricscope.css|fabricscope.css"
    "/web/fabricscope.js|fabricscope.js")
set(ctype_html "text/html")
set(ctype_css "text/css")
set(ctype_js "text/javascript")
set(c "/* Generated from collector/http/web/ by embed.cmake. Do not edit. */\n")
string(APPEND c "#include \"http/web/web_assets.h\"\n\n")
set(table "")
set(i 0)
foreach(a ${assets})
  string(REPLACE "|" ";" parts "${a}")
  list(GET parts 0 url)
  list(GET parts 1 file)
  get_filename_component(ext "${file}" LAST_EXT)
  string(SUBSTRING "${ext}" 1 -1 ext)
  set(ctype "${ctype_${ext}}; charset=utf-8")
  file(READ "${DIR}/${file}" hex HEX)
  file(SHA256 "${DIR}/${file}" sha)
  string(LENGTH "${hex}" hexlen)
  math(EXPR len "${hexlen} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(SUBSTRING "${sha}" 0 32 etag)
  string(APPEND c "static const char asset_${i}[] = {${bytes}0x00};\n")
  string(APPEND table "    {\"${url}\", \"${ctype}\", asset_${i}, ${len}, \"\\\"${etag}\\\"\"},\n")
  math(EXPR i "${i} + 1")
endforeach()
string(APPEND c "\nconst struct fs_web_asset fs_web_assets[] = {\n${table}    {0, 0, 0, 0, 0}};\n")
file(WRITE "${OUT}.tmp" "${c}")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
