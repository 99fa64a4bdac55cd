// Package kubelet plays the kubelet of envtest's nodes for burstcache
// server pods, for the test suites that run the operator against envtest
// (which has no kubelet). It runs each server pod's init containers and
// server container as real `burstcache server` processes on loopback, with
// the pod's host path and secret volumes mapped to real directories and
// files, as the pod's user, and reports the pod Running and Ready.
//
// Suites start the servers of an instance when they choose (RunServers), or
// let Run start every server pod as it appears and stop the processes of
// pods that went away, as a cluster's kubelets would. RegisterNodes creates
// the ready nodes the pods are placed on, and Binary gives the burstcache
// binary in a place the pods' users can run it from.
package kubelet
