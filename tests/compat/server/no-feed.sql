-- Nothing: the run's one record is its fatal step.
select 1;
