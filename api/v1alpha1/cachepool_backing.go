package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackingFilesystem is a file system that a pool's instances may cache: how
// cache servers reach it (set exactly one of hostPath, nfs and pvc), and the
// access rules that say which namespaces may cache which of its paths, as
// which users.
//
// The access rules are the trusted identity mapping of burstcache. An
// instance is accepted only if one rule of its backing file system matches
// its namespace, has a path prefix that contains its backing path, and allows
// its runAs: the uid in uidRanges, the gid and every supplemental group in
// gidRanges, and uid 0 or gid 0 only with allowRoot.
// +kubebuilder:validation:XValidation:rule="[has(self.hostPath), has(self.nfs), has(self.pvc)].filter(x, x).size() == 1",message="spec.backingFilesystems[*] must set exactly one of hostPath, nfs and pvc"
// +kubebuilder:validation:XValidation:rule="!has(self.accessRules) || self.accessRules.all(r, r.pathPrefixes.all(p, self.mountPath == '/' || p == self.mountPath || p.startsWith(self.mountPath + '/')))",message="spec.backingFilesystems[*].accessRules[*].pathPrefixes must be mountPath or paths under it",fieldPath=.accessRules
type BackingFilesystem struct {
	// name identifies the file system in instances' spec.backing.filesystem,
	// such as "lustre" or "home". A DNS label.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// mountPath is where jobs see the file system, such as /lus/global.
	// Instances' backing paths and the access rules' path prefixes are
	// written under it, so users write the paths they know.
	// +required
	MountPath AbsolutePath `json:"mountPath"`

	// hostPath: the file system is mounted on every cache node at this path
	// (usually the same as mountPath), as a Lustre or GPFS client mount is.
	// +optional
	HostPath *HostPathSource `json:"hostPath,omitempty"`

	// nfs: cache servers mount this NFS export themselves.
	// +optional
	NFS *NFSSource `json:"nfs,omitempty"`

	// pvc: cache servers mount this PersistentVolumeClaim, which must allow
	// ReadWriteMany since servers on several nodes mount it.
	// +optional
	PVC *PVCSource `json:"pvc,omitempty"`

	// accessRules say which namespaces may cache which paths, as which users.
	// A namespace that no rule matches may not cache this file system.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	AccessRules []AccessRule `json:"accessRules,omitempty"`
}

// NFSSource is an NFS export.
type NFSSource struct {
	// server is the host name or IP address of the NFS server.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Server string `json:"server"`

	// export is the exported path on the server, such as /export/home:
	// absolute and clean.
	// +required
	Export AbsolutePath `json:"export"`
}

// PVCSource is a PersistentVolumeClaim.
type PVCSource struct {
	// claimName is the name of the claim.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClaimName string `json:"claimName"`

	// namespace is the namespace of the claim.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
}

// AccessRule grants namespaces the right to cache paths as some identities.
// A namespace matches if it is listed in namespaces or selected by
// namespaceSelector.
// +kubebuilder:validation:XValidation:rule="has(self.namespaces) || has(self.namespaceSelector)",message="an access rule must set namespaces, namespaceSelector or both"
// +kubebuilder:validation:XValidation:rule="self.allowRoot || self.uidRanges.all(r, r.min > 0)",message="uidRanges include 0 (root) but allowRoot is false: start the ranges at 1 or set allowRoot",fieldPath=.uidRanges
// +kubebuilder:validation:XValidation:rule="self.allowRoot || self.gidRanges.all(r, r.min > 0)",message="gidRanges include 0 (root) but allowRoot is false: start the ranges at 1 or set allowRoot",fieldPath=.gidRanges
type AccessRule struct {
	// namespaces are names of namespaces the rule applies to.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	Namespaces []string `json:"namespaces,omitempty"`

	// namespaceSelector selects namespaces the rule applies to by their
	// labels. An empty selector selects every namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// pathPrefixes are the directories that the namespaces may cache, with
	// everything under them, such as /lus/global/projects/climate. Each is
	// absolute and clean, and mountPath or a path under it.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	PathPrefixes []AbsolutePath `json:"pathPrefixes"`

	// uidRanges are the user IDs that instances in the namespaces may run as.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	UIDRanges []IDRange `json:"uidRanges"`

	// gidRanges are the group IDs (primary and supplemental) that instances in
	// the namespaces may run as.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	GIDRanges []IDRange `json:"gidRanges"`

	// allowRoot lets instances run as uid 0 or gid 0, with ranges that
	// include 0. An instance running as uid 0 is a shared, multi-user cache:
	// its servers act as the calling process on each request, with its uid,
	// gid, supplementary groups and file-system capabilities, so that file
	// permissions are still those of the process in the job's pod. They act
	// only as ids of uidRanges and gidRanges: a caller outside them is
	// refused and its supplementary groups outside them are not used.
	// Grant it only to namespaces you trust with the identities of their
	// pods. Defaults to false.
	// +optional
	// +kubebuilder:default=false
	AllowRoot bool `json:"allowRoot,omitempty"`
}

// IDRange is an inclusive range of POSIX user or group IDs.
// +kubebuilder:validation:XValidation:rule="self.min <= self.max",message="an ID range must have min <= max"
type IDRange struct {
	// min is the first ID of the range, 0 to 4294967294.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4294967294
	Min int64 `json:"min"`

	// max is the last ID of the range, 0 to 4294967294.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4294967294
	Max int64 `json:"max"`
}
