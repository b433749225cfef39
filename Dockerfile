# One image for all three services: nissa-server, esper-train, esper-watch.
FROM python:3.11-slim

# torch is pinned; point TORCH_INDEX_URL at a CPU wheel index to keep the image small.
ARG TORCH_INDEX_URL=""
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml constraints.txt README.md ./
COPY leyline ./leyline
COPY nissa ./nissa
COPY ranks ./ranks
COPY trainer ./trainer
COPY nissa_server ./nissa_server
COPY tui ./tui

RUN if [ -n "$TORCH_INDEX_URL" ]; then \
        pip install -c constraints.txt --index-url "$TORCH_INDEX_URL" torch==2.13.0; \
    else \
        pip install -c constraints.txt torch==2.13.0; \
    fi \
    && pip install -c constraints.txt . \
    && useradd --create-home nissa \
    && mkdir -p /data /runs && chown nissa /data /runs

USER nissa
EXPOSE 8765
CMD ["nissa-server", "--help"]
