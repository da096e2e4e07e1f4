"""OpenCV's transparent API (UMat) on an OpenCL CPU device.

Prints one line per operation with the MD5 of the result computed through
OpenCL; scripts/test-opencl-apps.sh compares the lines of a native run with
those of a run through Wormhole. Canny is left out: OpenCV's OpenCL Canny
gives different results from run to run natively.
"""
import hashlib
import sys

import cv2
import numpy as np

if not cv2.ocl.haveOpenCL():
    sys.exit("OpenCV finds no OpenCL")
cv2.ocl.setUseOpenCL(True)
if not cv2.ocl.useOpenCL() or not cv2.ocl.Device.getDefault().name():
    sys.exit("OpenCV does not use an OpenCL device (set OPENCV_OPENCL_DEVICE=:CPU:)")

img = np.random.default_rng(7).integers(0, 256, (480, 640, 3), dtype=np.uint8)
ops = {
    "GaussianBlur": lambda a: cv2.GaussianBlur(a, (7, 7), 1.5),
    "resize": lambda a: cv2.resize(a, (320, 240), interpolation=cv2.INTER_LINEAR),
    "cvtColor": lambda a: cv2.cvtColor(a, cv2.COLOR_BGR2GRAY),
    "erode": lambda a: cv2.erode(a, np.ones((5, 5), np.uint8)),
    "warpAffine": lambda a: cv2.warpAffine(a, cv2.getRotationMatrix2D((320, 240), 30, 1.0), (640, 480)),
    "add": lambda a: cv2.add(a, a),
    "Sobel": lambda a: cv2.Sobel(a, cv2.CV_16S, 1, 0),
    "matchTemplate": lambda a: cv2.matchTemplate(a, cv2.UMat(img[100:140, 200:260].copy()), cv2.TM_SQDIFF),
}
for name, op in ops.items():
    out = op(cv2.UMat(img)).get()
    print(f"{name}: {out.shape} {hashlib.md5(out.tobytes()).hexdigest()}")
print("opencv: done")
