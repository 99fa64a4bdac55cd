// Package directive translates Cray DataWarp job script directives into
// burstcache requests, so that HPC users keep their habits. The text is the
// value of a pod or Job annotation, one directive per line:
//
//	#DW jobdw type=cache access_mode=striped pfs=/lus/global/run capacity=100TiB
//	#DW stage_in source=/lus/global/run/input destination=$DW_JOB_STRIPED/input type=directory
//	#DW persistentdw name=shared-cache
//
// jobdw becomes a CacheInstance spec (type, access_mode, capacity, pfs,
// pool, MFS, write_window_multiplier, write_window_length, sync_to_pfs),
// stage_in a preload path of a cache instance, stage_out the stage-out
// destination of a scratch instance, persistentdw a reference to an
// existing instance by name. Every line must be a directive: a line that is
// not, or that DataWarp would accept but burstcache cannot honour (such as
// access_mode=private or stage_in type=list), is refused with its line
// number and the reason, rather than silently ignored.
//
// DataWarp does not name the backing file system of pfs=; the spec's
// backing.filesystem is left empty unless the directive says filesystem=,
// and the caller picks the pool's file system whose mountPath holds the
// path.
package directive
