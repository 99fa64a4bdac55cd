package directive

import (
	"fmt"
	"path"
	"strings"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// jobRoot is how DataWarp job scripts name the root of the job instance.
const jobRoot = "$DW_JOB_STRIPED"

// stageIn translates "#DW stage_in" into a preload path of a cache instance:
// a transparent cache sees the backing files at their own paths, so staging
// in is copying them up ahead of time.
func stageIn(req *Request, opts map[string]string) string {
	if bad := known(opts, []string{"source", "destination", "type"}); bad != "" {
		return bad
	}
	if req.Job == nil || req.Job.Type != cachev1alpha1.CacheTypeCache {
		return "stage_in needs a jobdw type=cache line before it"
	}
	if opts["type"] != "file" && opts["type"] != "directory" {
		return fmt.Sprintf("stage_in type %q is not supported (want file or directory)", opts["type"])
	}
	src := opts["source"]
	if bad := absPath("source", src); bad != "" {
		return bad
	}
	pfs := string(req.Job.Backing.Path)
	if src != pfs && !strings.HasPrefix(src, strings.TrimSuffix(pfs, "/")+"/") {
		return fmt.Sprintf("source %s is not under pfs %s", src, pfs)
	}
	if want := jobPath(pfs, src); opts["destination"] != want {
		return fmt.Sprintf("destination %q must be %s: the cache shows each file at its own path", opts["destination"], want)
	}
	req.Job.Preload = append(req.Job.Preload, cachev1alpha1.AbsolutePath(src))
	return ""
}

// jobPath is where src of the cached path pfs appears in the job instance.
func jobPath(pfs, src string) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(src, pfs), "/")
	if rel == "" {
		return jobRoot
	}
	return path.Join(jobRoot, rel)
}

// stageOut translates "#DW stage_out" of a whole scratch instance into its
// stage-out destination. Its backing.filesystem is left for the caller, as
// for pfs=.
func stageOut(req *Request, opts map[string]string) string {
	if bad := known(opts, []string{"source", "destination", "type"}); bad != "" {
		return bad
	}
	if req.Job == nil || req.Job.Type != cachev1alpha1.CacheTypeScratch {
		return "stage_out needs a jobdw type=scratch line before it (a cache writes back by itself)"
	}
	if req.Job.StageOut != nil {
		return "a second stage_out: burstcache stages out the whole instance once"
	}
	if opts["type"] != "directory" || strings.TrimSuffix(opts["source"], "/") != jobRoot {
		return "stage_out must copy the whole instance: source=" + jobRoot + " type=directory"
	}
	if bad := absPath("destination", opts["destination"]); bad != "" {
		return bad
	}
	req.Job.StageOut = &cachev1alpha1.StageOut{Destination: cachev1alpha1.BackingPath{
		Path: cachev1alpha1.AbsolutePath(opts["destination"]),
	}}
	return ""
}
