// Command scale measures how the operator grows with the number of cache
// instances: with kwok simulating hundreds of SSD nodes on a real
// kube-apiserver and etcd, it creates N CacheInstances, waits until all are
// Ready, deletes them and waits until all are gone, for each N of -sizes.
// It reports wall time, the manager's CPU seconds and its peak memory, and
// how they grow from the smallest N to the largest.
//
// What is real: the API server and etcd (built by hack/envtest.sh), kwok
// (sigs.k8s.io/kwok, which plays the kubelets of the simulated nodes and
// marks their pods Running and Ready), the manager (the operator's
// controllers, run in a child process so that its CPU time and memory are
// its own), and one real `burstcache server` that answers every control
// call (stats and the teardown flush) for the simulated server pods, which
// have no processes behind them: a thousand real servers do not fit on a
// test machine. There is no kube-scheduler in this set-up: the harness binds
// each pending pod to the node its node selector names, which is all a
// scheduler does for server pods, since they are pinned. Webhooks are off;
// the reconciler applies the same admission policy again.
//
//	go run ./test/scale -burstcache bin/burstcache -kwok $(hack/tool.sh kwok) -out docs/bench
package main
