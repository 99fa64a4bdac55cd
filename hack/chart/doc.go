// Command chart generates the generated parts of the Helm chart
// charts/burstcache from `kustomize build config/default`, so that config/
// stays the single source of the manifests:
//
//   - crds/: the CustomResourceDefinitions, unchanged;
//   - templates/generated/: every other object, with the namespace, labels,
//     image, pull policy, pull secrets, replicas, resources and scheduling
//     turned into values (the image, pull policy and pull secrets also
//     handed to the manager and the node plugin as flags, for the pods they
//     create), the CSI objects switched by csi.enabled, and the webhook
//     certificate issuer switched by certManager.enabled;
//   - README.md: the values table, from the `# --` comments of values.yaml;
//   - dashboards/: copies of the Grafana dashboards of config/monitoring,
//     which templates/dashboard.yaml wraps in ConfigMaps.
//
// Chart.yaml, values.yaml and the templates that have no kustomize source
// (_helpers.tpl, the cert-manager Certificate, the ServiceMonitor and
// PodMonitor, the dashboard ConfigMap, the example CachePool and StorageClass) are written by hand. The Namespace of
// config/ is dropped: Helm installs into the release namespace.
//
//	kubectl kustomize config/default | go run ./hack/chart -chart charts/burstcache -config config
package main
