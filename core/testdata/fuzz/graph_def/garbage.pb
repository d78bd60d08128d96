

xPlaceholder"
dtype
Identityx:99^