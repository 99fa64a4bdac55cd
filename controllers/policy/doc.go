// Package policy holds the rules that tie a CacheInstance to its CachePool:
// whether the pool grants the instance's backing path and identity to its
// namespace, whether its knobs stay within the pool's ceilings, how much
// capacity it takes and whether it fits, and which defaults it gets.
//
// The validating webhook and the CacheInstance reconciler call the same
// functions, so that what the webhook refuses the controller refuses too,
// with the same reason. The functions are pure: callers fetch the pool, the
// namespace and the other instances, and this package only decides.
//
// Paths are compared after path.Clean, element by element, so that
// "/lus/a/../b" is not under "/lus/a" and "/lus/ab" is not under "/lus/a".
// Symbolic links cannot be judged here: cache servers resolve every path as
// spec.runAs, beneath the backing path, so a link inside an allowed prefix
// cannot lead outside it.
package policy
