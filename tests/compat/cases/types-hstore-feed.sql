insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000001', 'Y_@AGG@', 'k1', 'A', '{}', 'a=>1, b=>NULL', '');
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000002', 'Y_@AGG@', 'k2', 'B', '{}', '"k\"q"=>"v,w", "back\\slash"=>"x=>y"', 'zeta=>1, alpha=>2, mid=>3, Aa=>4, BB=>5');
begin;
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000003', 'Y_@AGG@', 'k3', 'C', '{}', null, 'k01=>1,k02=>2,k03=>3,k04=>4,k05=>5,k06=>6,k07=>7,k08=>8,k09=>9,k10=>10,k11=>11,k12=>12,k13=>13,k14=>14');
insert into @TABLE@ values ('7e000000-0000-4000-8000-000000000004', 'Y_@AGG@', 'k4', 'D', '{}', '"Zoë"=>"😀", "empty"=>""', 'x=>"a b"');
commit;
