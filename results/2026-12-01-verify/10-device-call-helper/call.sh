# Device call: the first use of scripts/device-call.sh (the shared preamble of call scripts):
# `entkv doctor` with the c99a74e binary.
PACK=.gpu/e.txz; source scripts/device-call.sh
ph doctor 60 .gpu/s/entkv doctor
cat $W/doctor.log
