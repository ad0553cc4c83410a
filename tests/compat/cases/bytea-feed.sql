insert into @TABLE@ values ('\x0001ff', 'B_@AGG@', '\xdeadbeef', 'Bin', '\x00ff10');
insert into @TABLE@ values ('key1', 'B_@AGG@', 'key1', 'Text', 'value1');
insert into @TABLE@ values ('\x03', 'B_@AGG@', '\x', 'EmptyKey', null);
insert into @TABLE@ values ('\x04', 'B_@AGG@', '\x80', 'EmptyPayload', '\x');
