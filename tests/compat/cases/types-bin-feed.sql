insert into @TABLE@ values ('\x01', 'Y_@AGG@', '\x6b31', 'A', '\x7b7d', '\xdeadbeef', '\x');
insert into @TABLE@ values ('\x02', 'Y_@AGG@', '\x', 'B', '\x', '\x', '\xfbff');
begin;
insert into @TABLE@ values ('\xfbffbf', 'Y_@AGG@', '\xfbef', 'C', '\xfbffbe', '\xfbffbe3f', '\x00');
insert into @TABLE@ values ('\x04', 'Y_@AGG@', '\x00ff', 'D', null, null, '\x61');
commit;
