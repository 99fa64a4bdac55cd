// Package webhooks holds the admission webhooks of CacheInstances: a
// defaulting webhook that fills in the pool's defaults at creation (and the
// knobs an update of the spec leaves unset), and a validating webhook that
// refuses an instance its pool does not allow. Both use package policy,
// which the CacheInstance reconciler uses too, so the webhook and the
// controller agree on every rule and its reason. Guards refuse to delete a
// namespace or a pool, or move a pool's media, while instances depend on
// them; a pod webhook translates #DW directives and gates pods until
// their instances are Ready; and a guard keeps cache server pods as the
// manager made them, out of reach of users who may edit pods.
package webhooks
