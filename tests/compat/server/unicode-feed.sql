-- Non-ASCII text in the payload (two- to four-byte UTF-8, a character
-- outside the BMP), escapes and a control character, and in the key.
insert into @TABLE@ values ('c1b2c3d4-0000-4000-8000-000000000001', 'unicode', 'Zoë-😀', 'Ünïcode',
  E'{"note": "h\u00e9llo", "cjk": "\u6f22\u5b57", "emoji": "\U0001F600", "q": "\\"q\\" \\\\ tab\\t", "ctl": "\\u0001", "slash": "a/b"}');
insert into @TABLE@ values ('c1b2c3d4-0000-4000-8000-000000000002', 'unicode', 'ascii', 'T', E'"\u00e9"');
