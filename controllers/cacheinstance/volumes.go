package cacheinstance

import (
	"path"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/controllers/policy"
)

// CacheHostDir is the directory on the node that holds server i's cache
// data: under the pool's media, one directory per instance (by UID, so that
// a new instance of the same name never finds an old one's data) and server.
func CacheHostDir(inst *cachev1alpha1.CacheInstance, pool *cachev1alpha1.CachePool, i int) string {
	if pool.Spec.Media.HostPath == nil {
		return ""
	}
	return path.Join(string(pool.Spec.Media.HostPath.Path), inst.Namespace, inst.Name+"-"+string(inst.UID), "server-"+strconv.Itoa(i))
}

func volumes(inst *cachev1alpha1.CacheInstance, pool *cachev1alpha1.CachePool, i int) []corev1.Volume {
	vols := []corev1.Volume{{Name: "cache", VolumeSource: cacheSource(inst, pool, i)}, secretVolume(inst)}
	if inst.Spec.Backing == nil {
		return append(vols, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	fs := policy.FindFilesystem(pool, inst.Spec.Backing.Filesystem)
	if fs == nil {
		return vols
	}
	return append(vols, corev1.Volume{Name: "backing", VolumeSource: backingSource(fs)})
}

// cacheSource is where server i keeps its cache data: its claim of the
// pool's StorageClass, or its directory under the pool's host path.
func cacheSource(inst *cachev1alpha1.CacheInstance, pool *cachev1alpha1.CachePool, i int) corev1.VolumeSource {
	if claimMedia(pool) {
		return corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: CacheClaimName(inst, i)}}
	}
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	return corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: CacheHostDir(inst, pool, i), Type: &dirOrCreate}}
}

// backingSource is how a server reaches the backing file system: the host's
// mount, an NFS export, or a claim.
func backingSource(fs *cachev1alpha1.BackingFilesystem) corev1.VolumeSource {
	dir := corev1.HostPathDirectory
	switch {
	case fs.HostPath != nil:
		return corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: string(fs.HostPath.Path), Type: &dir}}
	case fs.NFS != nil:
		return corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: fs.NFS.Server, Path: string(fs.NFS.Export)}}
	default:
		return corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: fs.PVC.ClaimName}}
	}
}

func volumeMounts(inst *cachev1alpha1.CacheInstance, pool *cachev1alpha1.CachePool) []corev1.VolumeMount {
	mounts := []corev1.VolumeMount{
		{Name: "cache", MountPath: cacheMountPath},
		{Name: "data-secret", MountPath: secretMountPath, ReadOnly: true},
	}
	if inst.Spec.Backing == nil {
		return append(mounts, corev1.VolumeMount{Name: "scratch", MountPath: scratchMountPath})
	}
	fs := policy.FindFilesystem(pool, inst.Spec.Backing.Filesystem)
	if fs == nil {
		return mounts
	}
	return append(mounts, corev1.VolumeMount{Name: "backing", MountPath: string(fs.MountPath)})
}
